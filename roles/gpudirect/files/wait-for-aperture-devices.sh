#!/bin/bash
# Installed by clusterctl (roles/gpudirect): slurmd's ExecCondition, from Google's a3mega blueprint
# (GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml@1047080, slurm_aperture.yml), unchanged.
# Wait up to 60 seconds for aperture devices to appear.
for i in $(seq 30); do
  # Check if the directory is not empty
  if [ -n "$(ls -A /dev/aperture_devices 2>/dev/null)" ]; then
    exit 0
  fi
  sleep 2
done
exit 1
