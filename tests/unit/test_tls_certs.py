"""The CA and server certificate `opsched up` generates (opsched/tls.py): a chain a TLS client verifies, the
SANs asked for, keys only the owner reads, reused while valid, made anew when not."""
from __future__ import annotations

import datetime
import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509

from opsched import tls
from opsched.bus.connecting import client_context
from opsched.tls import ensure_tls, server_cert_valid, subject_alt_names


def handshake(files: tls.TlsFiles, server_name: str) -> None:
    """A TLS handshake in memory: the server presents its certificate, the client verifies it with the CA."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(files.cert, files.key)
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_context(files.ca).wrap_bio(c_in, c_out, server_hostname=server_name)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        done = 0
        for side, out, peer_in in ((client, c_out, s_in), (server, s_out, c_in)):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
            peer_in.write(out.read())
        if done == 2:
            return
    raise AssertionError("handshake did not finish")


def test_the_server_certificate_is_signed_by_the_ca_and_a_client_with_the_ca_verifies_it(tmp_path: Path):
    files = ensure_tls(tmp_path / "tls")
    x509.load_pem_x509_certificate(files.cert.read_bytes()).verify_directly_issued_by(
        x509.load_pem_x509_certificate(files.ca.read_bytes()))
    handshake(files, "localhost")
    handshake(files, "127.0.0.1")


def test_a_name_not_in_the_certificate_fails_verification(tmp_path: Path):
    files = ensure_tls(tmp_path / "tls")
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch|doesn't match"):
        handshake(files, "nats.elsewhere.example")


def test_a_client_trusting_another_ca_fails_verification(tmp_path: Path):
    files = ensure_tls(tmp_path / "tls")
    other = ensure_tls(tmp_path / "other")
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        handshake(tls.TlsFiles(ca=other.ca, cert=files.cert, key=files.key), "localhost")


def test_sans_are_localhost_127_0_0_1_and_the_names_given(tmp_path: Path):
    files = ensure_tls(tmp_path / "tls", ("nats.opsched-system", "10.0.0.7"))
    sans = subject_alt_names(x509.load_pem_x509_certificate(files.cert.read_bytes()))
    assert set(sans) == {x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                         x509.DNSName("nats.opsched-system"), x509.IPAddress(ipaddress.ip_address("10.0.0.7"))}
    handshake(files, "nats.opsched-system")


def test_keys_are_readable_by_the_owner_only(tmp_path: Path):
    files = ensure_tls(tmp_path / "tls")
    assert stat.S_IMODE(files.key.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.ca_key.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "tls").stat().st_mode) == 0o700


def test_valid_certificates_are_reused(tmp_path: Path):
    first = ensure_tls(tmp_path / "tls")
    before = {p: p.read_bytes() for p in (first.ca, first.ca_key, first.cert, first.key)}
    again = ensure_tls(tmp_path / "tls")
    assert {p: p.read_bytes() for p in (again.ca, again.ca_key, again.cert, again.key)} == before


def test_a_new_host_gets_a_new_server_certificate_from_the_same_ca(tmp_path: Path):
    first = ensure_tls(tmp_path / "tls")
    ca, cert = first.ca.read_bytes(), first.cert.read_bytes()
    files = ensure_tls(tmp_path / "tls", ("nats.example",))
    assert files.ca.read_bytes() == ca and files.cert.read_bytes() != cert
    handshake(files, "nats.example")


def test_a_damaged_server_certificate_is_made_anew(tmp_path: Path):
    files = ensure_tls(tmp_path / "tls")
    files.cert.write_text("not a certificate")
    assert not server_cert_valid(files)
    ensure_tls(tmp_path / "tls")
    handshake(files, "localhost")


def test_a_replaced_ca_gets_its_server_certificate_re_signed(tmp_path: Path):
    files = ensure_tls(tmp_path / "tls")
    files.ca_key.unlink()
    old_ca = files.ca.read_bytes()
    ensure_tls(tmp_path / "tls")
    assert files.ca.read_bytes() != old_ca
    handshake(files, "localhost")


def test_certificates_about_to_run_out_are_made_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    files = ensure_tls(tmp_path / "tls")
    cert = files.cert.read_bytes()
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=tls.SERVER_DAYS) - tls.RENEW_BEFORE
    monkeypatch.setattr(tls, "_now", lambda: later)
    assert not server_cert_valid(files)
    ensure_tls(tmp_path / "tls")
    assert files.cert.read_bytes() != cert and server_cert_valid(files)
