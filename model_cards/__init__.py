"""The model-card templates (Jinja, huggingface_hub's ModelCard), one per method plus TaCL's student. Installed as the
package data of `hf_encoders.model_cards` (setup.py, pyproject.toml); this file makes that a regular package, which
an editable install can map here."""
