"""The recipe of each method `hf-encoders pretrain --method` knows (hf_encoders.families), imported only when chosen."""

from ...families import get_family, load
from .base import Recipe


def get_recipe(method: str) -> Recipe:
    family = get_family(method)
    return load(family.recipe)(family)
