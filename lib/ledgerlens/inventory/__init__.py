"""The inventory: what the sources read, as the tables every audit rule reads."""
