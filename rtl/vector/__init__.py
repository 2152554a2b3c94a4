"""The vector/activation engine: ALU lanes, the programmable LUT and the engine around them."""
