"""The source made ready to export: loaded, substituted, recovered, rebuilt."""
