"""setuptools reads everything from pyproject.toml but the package list, which pyproject.toml cannot state: every
package found under hf_encoders/, plus hf_encoders.model_cards, which pyproject.toml maps onto the repository's top
folder model_cards/ (the card templates, package data) and which no search of hf_encoders/ finds."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["hf_encoders*"]), "hf_encoders.model_cards"])
