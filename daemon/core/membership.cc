// placeholder: membership lands with the cluster work
