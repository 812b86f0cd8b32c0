"""Elect-Fattree: a two-tier leaf-spine with flows hashed over the spines (ECMP)."""
