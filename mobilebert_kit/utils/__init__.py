"""Small shared helpers with no model dependencies."""
