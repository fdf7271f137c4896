"""The opsched services. They share nothing but events on NATS; no service imports another."""

if __name__ != "opsched.services":  # services/ is the package opsched.services (opsched/services links to it): one name, one copy
    raise ImportError("import opsched.services, not services: the repository's services/ is installed as opsched.services")
