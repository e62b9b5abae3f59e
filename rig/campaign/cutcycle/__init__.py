"""The cut cycle: one cycle as named phases (`cycle`, `phases`), when to cut (`cuts`), the blocks
a check reads (`blocks`) and the drive running on after the switch's edge (`runon`)."""
