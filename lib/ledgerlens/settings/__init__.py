"""Settings: the cluster contexts, config files, secrets by reference, the runbooks' inputs."""
