#!/bin/bash
# Runs INSIDE the node-image build container (tools/build-kind-node-image.sh), after kind's base
# files and our binaries were copied in: turns the Debian root filesystem into what kind's
# entrypoint expects, the way kind's own base image is prepared (its Dockerfile is the record).
# usage: setup-node.sh SANDBOX_IMAGE
set -euo pipefail
sandbox_image="$1"

chmod 755 /kind /kind/bin /kind/bin/* /usr/local/bin/* /usr/local/sbin/* /opt/cni/bin/* /usr/bin/kube*
chown -R root:root /kind /usr/local/bin /usr/local/sbin /opt/cni /usr/bin/kubelet /usr/bin/kubeadm /usr/bin/kubectl

# systemd as PID 1 inside a container: no units that need real hardware or a real console
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
grep -q '^ReadKMsg=no' /etc/systemd/journald.conf || echo 'ReadKMsg=no' >> /etc/systemd/journald.conf
ln -sf /usr/lib/systemd/systemd /sbin/init
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests /opt/cni/bin /etc/cni/net.d

# containerd: the sandbox (pause) image kubeadm expects, and restrict_oom_score_adj on: these
# hosts forbid lowering oom_score_adj inside the node, and every pod sandbox fails without it
sed -i -e "s|^\(\s*sandbox_image\s*=\s*\).*|\1\"$sandbox_image\"|" \
       -e 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml
grep -q 'restrict_oom_score_adj = true' /etc/containerd/config.toml
grep -q "sandbox_image = \"$sandbox_image\"" /etc/containerd/config.toml

# the base OCI spec for pods: containerd's default plus kind's product-files hook, no rlimits
ctr oci spec \
  | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
  | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json

containerd --version
runc --version | sed -n 1p
kubelet --version
