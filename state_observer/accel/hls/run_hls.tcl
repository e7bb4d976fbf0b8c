# Vitis HLS build of the Gauss-Jordan kernel: C simulation with the testbench, synthesis, optional
# C/RTL co-simulation, export as a Vivado IP (ip_catalog).  Run from this folder:
#
#   vitis_hls -f run_hls.tcl                      (double, PYNQ-Z2 part)
#   GJ_PRECISION=1 GJ_PART=xck26-sfvc784-2LV-c vitis_hls -f run_hls.tcl   (float32, Kria K26)
#
# Environment (all optional):
#   GJ_PRECISION  0 double (default), 1 float32, 2 fixed point (ap_fixed<64, GJ_FIXED_I>)
#   GJ_FIXED_I    integer bits of the fixed-point type (default 24; the driver checks it)
#   GJ_NMAX       largest system (default 96; the detailed vehicle model has n = 82)
#   GJ_UNROLL     columns updated per clock (default 4)
#   GJ_PART       FPGA part (default xc7z020clg400-1: PYNQ-Z2; ZC702: xc7z020clg484-1;
#                 Kria KV260/KR260: xck26-sfvc784-2LV-c)
#   GJ_CLOCK_NS   clock period in ns (default 10: 100 MHz, the seeds' Gauss-Jordan clock)
#   GJ_COSIM      1 to run C/RTL co-simulation (slow)
#
# The IP lands in gj_prj/solution_<precision>/impl/ip (a .zip for the Vivado IP catalog).
# Tested here: nothing of this script (no Vitis HLS on the development machine); the same sources
# and testbench are compiled and run with g++ by test/test_accel.py.

proc env_or {name default} {
    if {[info exists ::env($name)] && $::env($name) ne ""} { return $::env($name) }
    return $default
}

set precision [env_or GJ_PRECISION 0]
set fixed_i   [env_or GJ_FIXED_I 24]
set nmax      [env_or GJ_NMAX 96]
set unroll    [env_or GJ_UNROLL 4]
set part      [env_or GJ_PART xc7z020clg400-1]
set clock_ns  [env_or GJ_CLOCK_NS 10]
set cosim     [env_or GJ_COSIM 0]
set names     {double float32 fixed}
set label     [lindex $names $precision]

# GJ_USE_AP_FIXED: C simulation uses Vitis HLS' ap_fixed, like synthesis (the host C model uses the
# plain C++ emulation in gj_fixed.h)
set cflags "-DGJ_PRECISION=$precision -DGJ_FIXED_I=$fixed_i -DGJ_NMAX=$nmax -DGJ_UNROLL=$unroll -DGJ_USE_AP_FIXED"

open_project -reset gj_prj
set_top gauss_jordan
add_files gauss_jordan.cpp -cflags $cflags
add_files gauss_jordan.h
add_files -tb gauss_jordan_tb.cpp -cflags $cflags

open_solution -reset "solution_$label" -flow_target vivado
set_part $part
create_clock -period $clock_ns -name default
# 64-bit m_axi addresses (the Vitis HLS default; the PYNQ driver's register offsets assume it)
config_interface -m_axi_addr64=true

csim_design
csynth_design
if {$cosim} {
    cosim_design
}
export_design -format ip_catalog -rtl verilog -vendor "state_observer" -library "hls" -version "1.0" \
    -description "Gauss-Jordan linear solve ($label, GJ_NMAX=$nmax)" -display_name "gauss_jordan"
exit
