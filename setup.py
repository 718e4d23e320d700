"""setuptools reads everything from pyproject.toml but the package list: `packages.find` finds every package under
hf_encoders/, and cannot add hf_encoders.model_cards, which pyproject.toml maps onto the repository's top folder
model_cards/ (the card templates, package data)."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["hf_encoders*"]), "hf_encoders.model_cards"])
