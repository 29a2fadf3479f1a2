"""A written file checked against its source: outputs, clients, the phone's CPU architecture."""
