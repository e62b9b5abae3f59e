"""Drive identity: what a campaign names a drive by, never a /dev node."""

from __future__ import annotations

from dataclasses import dataclass

from rig.config.tables import Table
from rig.errors import UserError


@dataclass(frozen=True)
class DriveIdentity:
    """Identity as reported by the drive. A campaign names a drive by WWN, or by serial + model."""

    model: str
    serial: str
    wwn: str = ""
    firmware: str = ""

    def matches(self, other: DriveIdentity) -> bool:
        """True when `other` is the same physical drive as the one this identity names.

        WWN decides when both have one; otherwise serial and model must both agree.
        """
        if self.wwn and other.wwn:
            return normalise_wwn(self.wwn) == normalise_wwn(other.wwn)
        return bool(self.serial) and self.serial == other.serial and self.model == other.model

    def label(self) -> str:
        parts = [
            self.model,
            f"s/n {self.serial}" if self.serial else "",
            f"wwn {self.wwn}" if self.wwn else "",
        ]
        return " ".join(part for part in parts if part)


def normalise_wwn(wwn: str) -> str:
    text = wwn.strip().lower()
    for prefix in ("0x", "naa.", "eui.", "wwn-"):
        text = text.removeprefix(prefix)
    return text.replace(" ", "")


def settings(drive_t: Table) -> DriveIdentity:
    """A [[drive]] entry's identity keys: wwn, or serial and model (firmware optional)."""
    identity = DriveIdentity(
        model=drive_t.get("model", str, ""),
        serial=drive_t.get("serial", str, ""),
        wwn=drive_t.get("wwn", str, ""),
        firmware=drive_t.get("firmware", str, ""),
    )
    if not identity.wwn and not (identity.serial and identity.model):
        raise UserError(f"campaign: {drive_t.where} must name the drive by wwn or serial + model")
    return identity
