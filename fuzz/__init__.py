"""Coverage-guided fuzz targets (atheris): `make fuzz`, bench/README.md (u). Not installed."""
