"""kind releases and node images, pinned by digest (kind requires digests for images built per release),
and the small local images the kind backend runs.

``LABKIT_KIND_NODE_IMAGE`` (read in labkit.cluster.backends.kind.config) replaces the pinned node image;
labkit's own tests set it to the offline image ``tools/build-kind-node-image.sh`` builds.
"""

from __future__ import annotations

from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[4]

#: the stand-in for workload images a kind cluster cannot pull or run (``vllm/vllm-openai``,
#: ``pytorch/pytorch``...): prints its environment (where CDI puts a claim's devices) and sleeps;
#: ``env`` inside it prints the environment and exits. Its command line gets the original
#: command and arguments, which it prints first.
WORKLOAD_IMAGE = "labkit/workload:dev"
#: an ordinary Dockerfile for it (``docker build -t WORKLOAD_IMAGE tools/kind-workload``);
#: labkit's tests build the same image without a registry (tools/build-test-images.sh)
WORKLOAD_DOCKERFILE = _REPO_ROOT / "tools" / "kind-workload" / "Dockerfile"

#: the kind release the images below were published with
KIND_VERSION = "v0.33.0"
#: oldest kind that can run the images below (they are built for this release)
KIND_MIN_VERSION = (0, 33, 0)

NODE_IMAGES: dict[str, str] = {
    "1.37": "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5",
    "1.36": "kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed",
    "1.35": "kindest/node:v1.35.8@sha256:07b2536e30b803ed61d1677a79df6115f798ce64c80f9e22f6ed45afd09323c0",
    "1.34": "kindest/node:v1.34.11@sha256:44e222ee2132dab25ff87301682f89eb82c7880ea3a1bf543bfe9708fd08d67d",
}


def node_image(kubernetes_version: str) -> str:
    minor = ".".join(str(kubernetes_version).lstrip("v").split(".")[:2])
    try:
        return NODE_IMAGES[minor]
    except KeyError:
        known = ", ".join(sorted(NODE_IMAGES))
        raise ValueError(
            f"kind: no pinned node image for Kubernetes {kubernetes_version}; known versions: {known}"
        ) from None


def parse_kind_version(text: str) -> tuple[int, int, int] | None:
    """`kind version` prints e.g. ``kind v0.33.0 go1.25.1 linux/amd64``."""
    for word in text.split():
        if word.startswith("v") and word.count(".") >= 2:
            parts = word[1:].split("-")[0].split(".")
            try:
                return int(parts[0]), int(parts[1]), int(parts[2])
            except (ValueError, IndexError):
                return None
    return None
