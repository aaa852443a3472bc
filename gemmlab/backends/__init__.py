"""Backends: one module per family of implementations (see base.py for the interface)."""
