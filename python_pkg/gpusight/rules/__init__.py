"""Rules: evidence -> findings with catalogue ids. Pure functions of plain data; no torch here."""
