"""Programs that run inside Mininet hosts (the emulated GPUs); no Mininet or os-ken imports here."""
