"""Throw-away PKI for a local control plane: a CA, the apiserver's serving cert, etcd's cert
(server, peer and the apiserver's client cert for etcd: etcd speaks mutual TLS only), the
service-account key pair and bearer tokens. Generated with the `cryptography` package when it
is installed, else with the openssl CLI."""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from labkit.fileio import write_bytes


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    etcd_cert: Path  # etcd's server/peer cert, also the apiserver's client cert for etcd (both EKUs)
    etcd_key: Path
    sa_key: Path  # private (signing) key, PEM
    sa_pub: Path  # public key, PEM
    token_file: Path  # --token-auth-file
    tokens: dict[str, str]  # user name -> bearer token


def _write(path: Path, data: bytes) -> Path:
    return write_bytes(path, data, mode=0o600)  # a key or a token: 0600 from its creation


def _pem_key(key) -> bytes:  # noqa: ANN001 - a cryptography private key
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def have_cryptography() -> bool:
    try:
        import cryptography.x509  # noqa: F401
    except ImportError:
        return False
    return True


def _sans(hosts: tuple[str, ...]) -> list[str]:
    return [*hosts, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "10.0.0.1"]


#: users with a static token: name -> groups. The names are the ones the RBAC bootstrap
#: policy already binds (system:kube-scheduler, system:kube-controller-manager).
USERS: dict[str, tuple[str, ...]] = {
    "admin": ("system:masters",),
    "system:kube-scheduler": (),
    "system:kube-controller-manager": (),
}


def generate(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), *,
             use_openssl: bool | None = None) -> Pki:
    """Write a fresh CA, serving cert for `hosts`, SA key pair and token file into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    if use_openssl is None:
        use_openssl = not have_cryptography()
    files = _openssl(directory, hosts) if use_openssl else _cryptography(directory, hosts)
    tokens = {user: secrets.token_urlsafe(32) for user in USERS}
    lines = [f'{tokens[u]},{u},{u},"{",".join(g)}"' if g else f"{tokens[u]},{u},{u}" for u, g in USERS.items()]
    token_file = _write(directory / "tokens.csv", ("\n".join(lines) + "\n").encode())
    return Pki(**files, token_file=token_file, tokens=tokens)


def _openssl(d: Path, hosts: tuple[str, ...]) -> dict[str, Path]:
    exe = shutil.which("openssl")
    if exe is None:
        raise RuntimeError("local backend: neither the `cryptography` package nor the openssl CLI is available; "
                           "pip install cryptography")

    def run(*args: str) -> None:
        subprocess.run([exe, *args], check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"), "-days", "30",
        "-subj", "/CN=labkit-local-ca")
    run("req", *ec, "-keyout", str(d / "apiserver.key"), "-out", str(d / "apiserver.csr"), "-subj", "/CN=kube-apiserver")
    sans = ",".join(("IP:" if h.replace(".", "").isdigit() or ":" in h else "DNS:") + h for h in _sans(hosts))
    (d / "ext.cnf").write_text(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\nbasicConstraints=critical,CA:FALSE\n")
    run("x509", "-req", "-in", str(d / "apiserver.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
        "-CAcreateserial", "-out", str(d / "apiserver.crt"), "-days", "30", "-extfile", str(d / "ext.cnf"))
    run("req", *ec, "-keyout", str(d / "etcd.key"), "-out", str(d / "etcd.csr"), "-subj", "/CN=labkit-etcd")
    (d / "etcd.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                "extendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=critical,CA:FALSE\n")
    run("x509", "-req", "-in", str(d / "etcd.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
        "-CAcreateserial", "-out", str(d / "etcd.crt"), "-days", "30", "-extfile", str(d / "etcd.cnf"))
    run("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(d / "sa.key"))
    run("pkey", "-in", str(d / "sa.key"), "-pubout", "-out", str(d / "sa.pub"))
    serving = d / "apiserver.crt"
    serving.write_bytes(serving.read_bytes() + (d / "ca.crt").read_bytes())
    for f in d.iterdir():
        f.chmod(0o600)
    return {"ca_cert": d / "ca.crt", "serving_cert": serving, "serving_key": d / "apiserver.key",
            "etcd_cert": d / "etcd.crt", "etcd_key": d / "etcd.key", "sa_key": d / "sa.key", "sa_pub": d / "sa.pub"}


def _cryptography(directory: Path, hosts: tuple[str, ...]) -> dict[str, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    until = now + dt.timedelta(days=30)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "labkit-local-ca")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for h in _sans(hosts):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    etcd_key = ec.generate_private_key(ec.SECP256R1())
    etcd_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "labkit-etcd")]))
        .issuer_name(ca_name).public_key(etcd_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = serialization.Encoding.PEM
    return {
        "ca_cert": _write(directory / "ca.crt", ca.public_bytes(pem)),
        "serving_cert": _write(directory / "apiserver.crt", cert.public_bytes(pem) + ca.public_bytes(pem)),
        "serving_key": _write(directory / "apiserver.key", _pem_key(key)),
        "etcd_cert": _write(directory / "etcd.crt", etcd_cert.public_bytes(pem)),
        "etcd_key": _write(directory / "etcd.key", _pem_key(etcd_key)),
        "sa_key": _write(directory / "sa.key", _pem_key(sa)),
        "sa_pub": _write(directory / "sa.pub", sa.public_key().public_bytes(
            pem, serialization.PublicFormat.SubjectPublicKeyInfo)),
    }


def kubeconfig(server: str, ca_cert: Path, token: str, user: str = "admin") -> str:
    """A kubeconfig (YAML text) for `server` with a bearer token; context name "labkit-local"."""
    import yaml

    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "labkit-local",
        "clusters": [{"name": "labkit-local",
                      "cluster": {"server": server, "certificate-authority": str(ca_cert)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "labkit-local", "context": {"cluster": "labkit-local", "user": user}}],
    }, sort_keys=False)
