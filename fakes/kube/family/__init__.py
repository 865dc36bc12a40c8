"""The Kubernetes-family real base (kube, Volcano and the gang variants), split by concern."""
from fakes.kube.family.base import RealKubeFamily
from fakes.kube.family.cluster import apiserver_args
from fakes.kube.family.gang import NS, TIMEOUT, Gang

__all__ = ["NS", "TIMEOUT", "Gang", "RealKubeFamily", "apiserver_args"]
