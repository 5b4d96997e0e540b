"""Task templates of the web family, one module per category (see `base.Template`)."""

from horizonrl.envs.web.taskgen import admin, maps, shopping, social
from horizonrl.envs.web.taskgen.base import Template

TEMPLATES: list[Template] = [*shopping.TEMPLATES, *admin.TEMPLATES, *maps.TEMPLATES, *social.TEMPLATES]
"""Every template, in a fixed order (train tasks are drawn from them round-robin)."""
