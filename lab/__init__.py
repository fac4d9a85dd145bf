"""The bare-metal lab: the bare-metal example booted for real on this machine's KVM (or qemu's TCG).

Everything a site has between its control machine and its servers, made of virtual parts on one
host: a Linux bridge as the management network, libvirt domains as the servers, sushy-tools'
Redfish emulator (libvirt driver, HTTPS with basic auth) as their BMCs, dnsmasq (as clusterctl
renders it) and an HTTP server as the PXE server. ``clusterctl up`` then runs as on a site, with
one difference: the Pulumi engine cannot be installed here, so :mod:`lab.engine` drives the
bare-metal stack's own dynamic provider (RedfishNode create/read/delete) for each machine, as the
engine would. Nothing else is replaced.

``python -m lab up SPEC`` builds it and brings the cluster up; ``python -m lab down SPEC`` removes
all of it. ``python -m lab.clusterctl ...`` is clusterctl with the lab's engine.
"""
