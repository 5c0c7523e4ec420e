//! Configuration: the known settings, their defaults, and resolution from file and environment.
