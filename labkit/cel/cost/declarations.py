"""The DRA environment's declared types and sizes (the limits of the resource.k8s.io API)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from labkit.cel._checked import DYN, Type


@dataclass(eq=False)
class Decl:
    """A declared type of the environment: its maximum size and how paths walk through it."""

    max: int
    type: Type
    fields: dict[str, Decl] = field(default_factory=dict)
    key: Decl | None = None
    elem: Decl | None = None


STRING, BOOL, INT, UINT, DOUBLE = Type("string"), Type("bool"), Type("int"), Type("uint"), Type("double")
QUANTITY = Type("message", "kubernetes.Quantity")
DEVICE = Type("message", "kubernetes.DRADevice")


@lru_cache(maxsize=4)
def device_decl(consumable_capacity: bool, list_type_attributes: bool) -> tuple[Decl, Decl]:
    """(device, attribute value) declarations, with the limits of the resource.k8s.io API."""
    domain, ident = Decl(63, STRING), Decl(32, STRING)
    # an attribute value: 64 characters, or (list-type attributes) at most max(64, 48) items
    attribute = Decl(64, DYN if list_type_attributes else Type("any"))
    inner_attrs = Decl(32, Type("map", params=(STRING, attribute.type)), key=ident, elem=attribute)
    attrs = Decl(32, Type("map", params=(STRING, inner_attrs.type)), key=domain, elem=inner_attrs)
    quantity = Decl(0, QUANTITY)
    inner_caps = Decl(32, Type("map", params=(STRING, QUANTITY)), key=ident, elem=quantity)
    caps = Decl(32, Type("map", params=(STRING, inner_caps.type)), key=domain, elem=inner_caps)
    fields = {"driver": Decl(63, STRING), "attributes": attrs, "capacity": caps}
    if consumable_capacity:
        fields["allowMultipleAllocations"] = Decl(1, BOOL)
    return Decl(0, DEVICE, fields=fields), attribute


def walk(root: Decl, attribute: Decl, path: tuple[str, ...]) -> Decl | None:
    """The declaration a field path (``device``, field names, @items/@values/@keys) reaches."""
    if not path or path[0] != "device":
        return None
    node = root
    for name in path[1:]:
        if name in ("@items", "@values"):
            nxt = node.elem
        elif name == "@keys":
            nxt = node.key
        else:
            nxt = node.fields.get(name)
            if nxt is None and node.elem is attribute:
                nxt = attribute  # any name in an attribute map: the attribute value limit
        if nxt is None:
            return None
        node = nxt
    return node

