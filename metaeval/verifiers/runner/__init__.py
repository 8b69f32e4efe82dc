from .orchestration import *  # noqa: F401,F403
from .orchestration import __all__  # noqa: F401
