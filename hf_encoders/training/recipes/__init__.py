"""The methods `hf-encoders pretrain --method` knows, imported only when chosen."""

from importlib import import_module

from .base import Recipe

RECIPES = {
    "mlm": "hf_encoders.training.recipes.mlm:MlmRecipe",
    "mae-lm": "hf_encoders.training.recipes.mae_lm:MaeLmRecipe",
    "tacl": "hf_encoders.training.recipes.tacl:TaclRecipe",
    "biphasic": "hf_encoders.training.recipes.biphasic:BiphasicRecipe",
}


def get_recipe(method: str) -> Recipe:
    if method not in RECIPES:
        raise ValueError(f"Unknown --method {method!r}; choose one of {', '.join(RECIPES)}.")
    module, _, class_name = RECIPES[method].partition(":")
    return getattr(import_module(module), class_name)()
