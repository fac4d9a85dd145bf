#!/usr/bin/python
"""Ansible module: the node's installed Debian packages as ``ansible_facts.packages``, read with one dpkg-query.

clusterctl.node.package_facts gives the roles the fact ``ansible.builtin.package_facts`` gives
(``{name: [{name, version, arch, source}]}``), so a role can swap one for the other.

Why: on Debian and Ubuntu ``ansible.builtin.package_facts`` reads the packages through python-apt:
it opens the whole apt cache (every package of every configured repository, some 60,000 on Debian
12) and asks each one whether it is installed, several CPU-seconds per call on a node and more on a
busy one. The GPU roles read the packages before and after each install, so a GPU node's apply made
about a dozen such calls. dpkg-query reads only dpkg's status file.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: package_facts
short_description: The installed Debian packages as the packages fact, from one dpkg-query call
description:
  - Runs C(dpkg-query --show) once and returns every installed package as C(ansible_facts.packages), in the
    shape of C(ansible.builtin.package_facts) (name to a list of C(name), C(version) with its epoch, C(arch),
    C(source)).
  - A package counts as installed when dpkg has a version of it on the node (installed, unpacked, half
    configured or waiting on triggers), as python-apt's C(is_installed) says; removed packages whose
    configuration files remain do not.
options: {}
author: clusterctl
"""

RETURN = r"""
ansible_facts:
  description: C(packages), name to a list of dicts (C(name), C(version), C(arch), C(source) = C(dpkg)).
  returned: always
  type: dict
"""

# One line per package: current status abbreviation, name (with :arch for a foreign architecture),
# version, architecture. Tabs: none of the fields can hold one.
FORMAT = "${db:Status-Abbrev}\t${binary:Package}\t${Version}\t${Architecture}\n"
# dpkg's current-status letters (the second of Status-Abbrev) with no version on the node:
# n (not installed) and c (only configuration files left).
ABSENT = frozenset("nc")


def parse(output: str) -> dict[str, list[dict[str, str]]]:
    """dpkg-query's lines (``FORMAT``) -> the packages fact."""
    packages: dict[str, list[dict[str, str]]] = {}
    for line in output.splitlines():
        fields = line.split("\t")
        if len(fields) != 4:
            continue
        status, name, version, arch = fields
        if len(status) < 2 or status[1] in ABSENT or not name or not version:
            continue
        packages.setdefault(name, []).append({"name": name, "version": version, "arch": arch, "source": "dpkg"})
    return packages


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    rc, out, err = module.run_command(
        ["dpkg-query", "--show", f"--showformat={FORMAT}"], environ_update={"LC_ALL": "C"}
    )
    if rc != 0:
        module.fail_json(msg=f"dpkg-query failed (exit {rc}): {err.strip()[-2000:]}")
    module.exit_json(changed=False, ansible_facts={"packages": parse(out)})


if __name__ == "__main__":
    main()
