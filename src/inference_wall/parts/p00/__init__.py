"""Part 0, inside a step (transitional: the old module's names)."""
from . import view as _core

globals().update({k: v for k, v in vars(_core).items() if not k.startswith("__")})
