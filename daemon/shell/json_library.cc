// Boost.JSON's implementation, compiled once for the daemon: Debian ships
// Boost.JSON as headers only, so exactly one translation unit includes its
// sources and every other one includes <boost/json.hpp>.
#include <boost/json/src.hpp>
