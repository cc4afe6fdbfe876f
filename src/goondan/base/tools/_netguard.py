"""Which addresses http-fetch may connect to, decided on the resolved address of every connection.

A model that can fetch URLs can be talked (by a web page, an e-mail, a tool output) into fetching
``http://169.254.169.254/`` (cloud credentials) or the user's router, database or admin ports. So
loopback, private, link-local, unique-local, CGNAT, multicast, unspecified, reserved and metadata
addresses are refused unless the Tool config's ``allowHosts`` lists the host name or a network
containing the address.

The check runs inside the connection itself (an httpcore network backend under the tool's httpx
client), on each address ``getaddrinfo`` returned, and the socket connects to exactly that checked
address: there is no second lookup a rebinding DNS server could answer differently, every odd
spelling (``2130706433``, ``0x7f.1``, ``0``, ``[::ffff:7f00:1]``) is judged by the address it
resolves to, and each redirect hop opens a new, checked connection.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any

from goondan.base.tools._common import ToolExecutionError
from goondan.errors import GoondanError

ADDRESS_REFUSED = "E_TOOL_ADDRESS_REFUSED"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_METADATA = (ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    hosts: frozenset[str] = frozenset()  # lower-cased names; "*.example.com" matches sub-domains
    networks: tuple[IPNetwork, ...] = ()

    def host_allowed(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        if name in self.hosts:
            return True
        return any(h.startswith("*.") and name.endswith(h[1:]) for h in self.hosts)

    def address_allowed(self, address: IPAddress) -> bool:
        return any(address in net for net in self.networks if net.version == address.version)


def parse_address_policy(raw: Any, where: str) -> AddressPolicy:
    """``allowHosts: [name | IP | CIDR, ...]``; anything else is ``E_TOOL_CONFIG_INVALID``."""
    if raw is None:
        return AddressPolicy()
    if not isinstance(raw, list) or not all(isinstance(item, str) and item.strip() for item in raw):
        raise GoondanError(
            "E_TOOL_CONFIG_INVALID",
            f"{where}: allowHosts must be a list of host names, IP addresses or CIDR networks",
            suggestion="Write e.g. allowHosts: [localhost, 127.0.0.1, 10.0.0.0/8, '*.internal.example'].",
        )
    hosts: set[str] = set()
    networks: list[IPNetwork] = []
    for item in raw:
        text = item.strip().strip("[]")
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            hosts.add(text.lower().rstrip("."))
    return AddressPolicy(frozenset(hosts), tuple(networks))


def _unwrap(address: IPAddress) -> IPAddress:
    """The IPv4 address hidden in an IPv4-mapped, IPv4-compatible, 6to4 or NAT64 IPv6 address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if int(address) >> 32 == 0 and int(address) > 1:  # deprecated IPv4-compatible ::a.b.c.d
            return ipaddress.IPv4Address(int(address))
    return address


def refusal_reason(address: IPAddress) -> str | None:
    """Why ``address`` is not a public unicast address, or ``None`` when it is one."""
    inner = _unwrap(address)
    if address in _METADATA or inner in _METADATA:
        return "cloud metadata"
    checks = (
        ("loopback", inner.is_loopback),
        ("unspecified", inner.is_unspecified),
        ("link-local", inner.is_link_local),
        ("multicast", inner.is_multicast),
        ("CGNAT", isinstance(inner, ipaddress.IPv4Address) and inner in _CGNAT),
        ("private", inner.is_private),
        ("reserved", inner.is_reserved),
        ("not globally routable", not inner.is_global),
    )
    for reason, hit in checks:
        if hit:
            return f"{reason} ({inner})" if inner is not address else reason
    return None


def refused_error(host: str, refused: list[str]) -> ToolExecutionError:
    addresses = ", ".join(dict.fromkeys(refused)) or "no address"
    return ToolExecutionError(
        ADDRESS_REFUSED,
        f"refused to connect to {host}: it resolves to {addresses}",
        suggestion=(
            "http-fetch does not reach loopback, private, link-local or metadata addresses. If this "
            f"host is meant to be reachable, add '{host}' (or its network) to the http-fetch Tool "
            "config allowHosts."
        ),
    )


async def checked_addresses(policy: AddressPolicy, host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to that ``policy`` allows, in resolver order; raises
    :data:`ADDRESS_REFUSED` when it resolves only to refused ones. Resolution failures raise
    ``OSError`` (``socket.gaierror``)."""
    trusted_name = policy.host_allowed(host)
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    allowed: list[str] = []
    refused: list[str] = []
    for _family, _kind, _proto, _canon, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        reason = None if trusted_name or policy.address_allowed(ip) else refusal_reason(ip)
        if reason is not None:
            refused.append(f"{ip} ({reason})")
        elif str(ip) not in allowed:
            allowed.append(str(ip))
    if not allowed:
        raise refused_error(host, refused)
    return allowed


def guarded_network_backend(policy: AddressPolicy) -> Any:
    """An httpcore network backend that connects only to checked addresses.

    httpcore asks it for a TCP stream to ``host:port``; it resolves the name once, checks every
    address, and connects to exactly a checked one (TLS still verifies and sends the host name, which
    httpcore passes separately). There is no second lookup a rebinding DNS server could answer
    differently, and each redirect hop to a new host opens a new, checked connection.
    """
    import httpcore

    class GuardedBackend(httpcore.AsyncNetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> httpcore.AsyncNetworkStream:
            try:
                addresses = await checked_addresses(policy, host, port)
            except OSError as exc:
                raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
            last: Exception | None = None
            for address in addresses:
                try:
                    return await self._inner.connect_tcp(
                        address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                    )
                except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                    last = exc
            assert last is not None
            raise last

        async def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Any = None
        ) -> httpcore.AsyncNetworkStream:
            raise httpcore.ConnectError("http-fetch does not connect to Unix sockets")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    return GuardedBackend()


__all__ = [
    "ADDRESS_REFUSED",
    "AddressPolicy",
    "checked_addresses",
    "guarded_network_backend",
    "parse_address_policy",
    "refusal_reason",
    "refused_error",
]
