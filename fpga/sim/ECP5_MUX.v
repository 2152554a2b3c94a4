// Behavioural models of the ECP5 cells that rtl/arith/wide_mux.py instantiates, for
// simulating an ECP5 netlist (tests/test_wide_mux.py). Written from the ECP5 family data
// sheet's slice description (LUT4 truth table, PFUMX and L6MUX21 selects), not from Lattice's
// simulation library.
`timescale 1ns / 1ps

// Z = INIT[{D, C, B, A}]
module LUT4 #(parameter [15:0] INIT = 16'h0000) (input A, B, C, D, output Z);
    assign Z = INIT[{D, C, B, A}];
endmodule

// Z = C0 ? ALUT : BLUT
module PFUMX (input ALUT, BLUT, C0, output Z);
    assign Z = C0 ? ALUT : BLUT;
endmodule

// Z = SD ? D1 : D0
module L6MUX21 (input D0, D1, SD, output Z);
    assign Z = SD ? D1 : D0;
endmodule
