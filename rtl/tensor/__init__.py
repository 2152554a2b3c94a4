"""The tensor engine: a weight-stationary systolic array (:mod:`.engine`), its processing
element (:mod:`.pe`) and grid (:mod:`.array`), and the PSUM accumulator (:mod:`.psum`)."""
