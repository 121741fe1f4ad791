"""The configuration: YAML loading with `${VAR}` expansion and the search order, the typed pydantic
model, and field docstrings used as descriptions in the generated docs and schema.

May import: `core`. A new setting is a field on a model in `model.py` (with its docstring);
regenerate docs/config.md (tests/unit/config/test_config.py says how).
"""
