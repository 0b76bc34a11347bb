"""Added by overlays/smoke-ext: present only in a checkout the overlay was applied to."""

OVERLAY = "smoke-ext"
