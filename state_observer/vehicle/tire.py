r"""TMeasy tire (linearised, TMeasy, brush or Magic-Formula-shaped characteristic), first-order deflection dynamics.

The tire model of the A Coruña multibody observers (Sanjurjo 2016 §5.3, eqs 5.27-5.41;
Rodríguez 2020 §5.2.2, eqs 5.1-5.12; after Hirschberg, Rill and Weinfurter 2007),
vectorised over N wheels: every input and output is an (N,) array.

Frames and signs
----------------
Tire frame: x along the wheel heading in the road plane, y to its left in the road
plane, z along the road normal.  ``vx_m_s``, ``vy_m_s`` are the velocity of the
contact point in that frame (Sanjurjo App. A: the wheel-centre velocity with its
road-normal component removed), ``omega_rad_s`` the spin rate (positive rolling
forward), ``r_D`` the dynamic rolling radius.  Returned forces act ON the wheel FROM
the road, in the tire frame; the rolling-resistance torque acts on the wheel about its
spin axis (positive = forward).

Normal force (spring-damper, compression only)
----------------------------------------------
    xi_z = r_0 - (distance from wheel centre to road)          (compression, m)
    F_z  = max(0, k_z xi_z + d_z dxi_z/dt)   if xi_z > 0,   else 0

No tension: an airborne wheel carries nothing, and the damper cannot pull the wheel
down during a fast rebound.  (At touch-down F_z jumps from 0 to d_z dxi_z/dt, the
usual Kelvin-Voigt contact.)

Slips (TMeasy normalisation, both directions normalised by the same velocity)
-----------------------------------------------------------------------------
    v*  = r_D |Omega| + v_n                                     (v_n > 0 regularises)
    dv_x = r_D Omega - v_x,   dv_y = -v_y                       (slip velocities, m/s)
    s_x = dv_x / v*  (> 0 driving),   s_y = dv_y / v*

Linearised characteristic, combined slip
----------------------------------------
With k_x = dF_x/ds_x / F_z (longitudinal slip stiffness per unit load, -) and
k_y = dF_y/ds_y / F_z (cornering stiffness per unit load, 1/rad):

    sigma_x = k_x s_x,  sigma_y = k_y s_y,  sigma = |(sigma_x, sigma_y)|
    F      = F_z min(sigma, mu)                 (linear up to sigma = mu, then mu F_z)
    F_x^S  = F sigma_x / sigma,   F_y^S = F sigma_y / sigma

Writing w = |(k_x dv_x, k_y dv_y)| (m/s) so that sigma = w / v*, both regions collapse to

    m1     = min(1/v*, mu/w) = mu / max(w, mu v*)               (s/m, per unit load)
    m_x    = k_x F_z m1,   m_y = k_y F_z m1                     ("slip dampers", N s/m)
    F_x^S  = m_x dv_x,     F_y^S = m_y dv_y                     (finite at sigma = 0)

so the steady-state force is a viscous law in the slip velocity whose coefficient
drops as 1/w once the tire slides.

Magic-Formula characteristic with load sensitivity (``shape_factor`` C > 0)
-------------------------------------------------------------------------
The second family (the "truth" tire of simulations; the observer keeps the linearised one)
replaces min(sigma, mu) by the pure-slip Magic Formula shape (Pacejka 2012 §4.3.2), with the
same normalised combined slip sigma and the same first-order deflection dynamics below:

    lam_k  = max(1 - q_k (F_z/F_z0 - 1), 0.2),  lam_mu = max(1 - q_mu (F_z/F_z0 - 1), 0.2)
    k_x -> k_x lam_k,  k_y -> k_y lam_k,  D = mu_eff = mu lam_mu    (load sensitivity)
    f(sigma) = D sin(C atan(B sigma - E (B sigma - atan(B sigma)))),   B = 1/(C D)
    F      = F_z f(sigma),    m1 = f(sigma)/w   (-> 1/v* as w -> 0)

B C D = 1 gives f'(0) = 1: at small slip F = F_z sigma, the linearised law with stiffness
k lam_k.  For 1 < C <= 2, f peaks at D where C atan(...) = pi/2 and falls towards
D sin(C pi/2) for large sigma (C = 1 only approaches D).  E < 1 keeps the argument increasing,
so f > 0 for sigma > 0 and the secant G = v* m stays positive.  The slip dampers m_x = k_x lam_k F_z m1, m_y = k_y lam_k F_z m1
and everything after them are as in the linearised family; with C = 0 the code runs the
linearised law unchanged (and then E must be 0).  For B sigma < 1e-4 the series
f = sigma + b sigma^3, b = -B^2 ((1 + E)/3 + C^2/6), replaces the 0/0 of f/w.

Load sensitivity (every characteristic)
---------------------------------------
A real tire's cornering stiffness and friction grow less than its load (Pacejka 2012 §1.2; Rill 2012 §3.3: TMeasy's
data give the cornering stiffness at F_z,N and 2 F_z,N).  The scaling of the Magic-Formula family above, k -> k lam_k
and mu -> mu lam_mu, applies to each characteristic (q_k = q_mu = 0: none).  Each is f(sigma) = D g(sigma / D), so
the load derivative of m1 is w dm1/dw (l_k - l_mu), l = (dlam/dF_z)/lam.

Brush characteristic (``shape_factor`` = BRUSH = -1)
---------------------------------------------------
The isotropic brush model with a parabolic pressure distribution (Pacejka 2012 §3.2; Fiala 1954) in the same
normalised combined slip: with z = sigma / (3 mu),

    f(sigma) = mu (1 - (1 - z)^3)   (z < 1),      mu   (z >= 1: the whole contact patch slides)

f'(0) = 1 (the linearised law at small slip) and f' = (1 - z)^2 falls to 0 at full sliding, so the force leaves the
linear law gradually from the first degree of slip (at three quarters of mu it needs 1.5 times the linear law's slip)
instead of at mu.  It needs no parameter beyond k and mu.  Here m1 = f/w = (1 - z + z^2/3)/v* (finite at w = 0),
dm1/dw = (-1 + 2 z/3)/(3 mu v*^2); from z = 1, m1 = mu/w as in the linearised family.

TMeasy characteristic (``shape_factor`` = TMEASY = -2)
-----------------------------------------------------
TMeasy's own curve up to its peak (Rill 2012 §3.3; Hirschberg, Rill and Weinfurter 2007): a rational function of
the normalised slip with slope 1 at zero and its maximum D = mu at the slip s_M = a D, where the linear law would
reach D at the slip D:

    f(sigma) = sigma / (1 + x (x + a - 2)),   x = sigma / (a D)   (x < 1),      D   (x >= 1)

a = TMEASY_PEAK_RATIO = 2: a passenger-car tire gives its largest force at about twice the slip angle where its
cornering stiffness would reach it (f = D / (1 + x^2) sigma).  Past the peak the force is held at D (TMeasy's
fall to the sliding force is left out: a tire model that gives less force for more slip makes the sideslip of a
filter ambiguous).  Between the linearised characteristic, which over-states the force from half the friction on, and the
brush one, which under-states it from the first degree, it is the curve an observer of an unknown tire keeps by
default.  m1 = f/w = 1/(v* (1 + x (x + a - 2))), f' = (1 - x^2)/(1 + x (x + a - 2))^2,
dm1/dw = -(2 x + a - 2)/(a D v*^2 (1 + x (x + a - 2))^2); from x = 1, m1 = D/w, continuous with its derivative.

First-order deflection dynamics
-------------------------------
The carcass deflects by xi (per direction; c = deflection stiffness, d = damping) and
transmits F^D = c xi + d dxi/dt.  The deflection rate changes the slip velocity of the
contact patch, dv -> dv - dxi/dt, i.e. s -> s - (dxi/dt)/v*.  Equating F^D to the
steady-state force linearised in dxi/dt,

    c xi + d dxi/dt = F^S - G (dxi/dt)/v*,   G = dF^S/ds along that direction,
    (v* d + G) dxi/dt = v* F^S - v* c xi                        (Sanjurjo eq. 5.32-5.33).

G (per direction, with the normalised slips): in the linear region
F_x^S = F_z k_x s_x, so the tangent is G_x = k_x F_z exactly (and G_y = k_y F_z).  In the
saturated region the tangent dF_x^S/ds_x = mu F_z k_x sigma_y^2/sigma^3 is zero for
pure slip and jumps at sigma = mu (from k_x F_z to k_x F_z sigma_y^2/sigma^2); with the
full TMeasy curve it even turns negative past the peak.  The secant is used there
instead (Sanjurjo eq. 5.40-5.41): G_x = k_x F/sigma = k_x mu F_z/sigma, G_y = k_y F/sigma.
It is positive whenever F_z > 0 and continuous at sigma = mu, and a sliding or locked
tire relaxes at a finite rate to, and then keeps, the deflection F^S/c.  Both regions
are the one formula G_k = k_k F/sigma = k_k F_z min(1, mu/sigma) = v* m_k.  Dividing by
v* > 0:

    (d + m) dxi/dt = F^S - c xi        (m = m_x or m_y: the slip damper in series
                                        with the carcass spring-damper c, d)

With m, F^S frozen over the step dt (they depend on the inputs, not on xi):

    a       = v* c / (v* d + G) = c / (d + m)                   (1/s)
    xi_ss   = F^S / c
    xi(dt)  = xi_ss + (xi0 - xi_ss) E,        E = exp(-a dt)
    dxi/dt  = a (xi_ss - xi(dt))                                 (at the end of the step)
    F^D     = c xi(dt) + d dxi/dt = F^S + (c xi0 - F^S) E H,     H = m / (d + m)

F^D is a convex combination of F^S and c xi0 (0 <= E H <= 1), so
|F^D| <= max(|F^S|, |c xi0|) <= max(mu F_z, |c xi0|): forces stay bounded for any slip
(mu_eff F_z for the Magic Formula family).
Relaxation length (distance rolled per time constant): v*/a = v* d/c + G/c, which
tends to k_x F_z / c_x (a speed-independent value) when d -> 0.

Limiting cases:
* standstill (v -> 0, Omega -> 0): v* = v_n, m = k F_z / v_n is huge, so a ~ c v_n/(k F_z)
  is tiny and E H -> 1: the deflection is held (F^D ~ c xi0) and decays slowly; this is
  TMeasy's stick-slip model.  No division by zero for any v_n > 0.
* locked wheel sliding (Omega = 0, |v| > 0): saturated, m = k mu F_z / w, a = c/(d + m);
  the deflection tends to F^S/c = mu F_z (direction)/c.
* airborne (F_z = 0): m = 0, F^S = 0, H = 0, so F^D = 0 and xi relaxes with a = c/d.
* reversing: the slip definitions are sign-symmetric; free rolling backwards
  (r_D Omega = v_x < 0, v_y = 0) gives zero force.

Rolling resistance
------------------
    T_rr = -C_rr F_z r_D tanh(Omega / omega_eps)

tanh is a smooth sign: omega_eps (rad/s, default ``ROLLING_OMEGA_EPS_RAD_S`` = 0.5, i.e.
0.15 m/s at r_D = 0.3 m) is the spin rate below which the torque fades linearly to zero.
A wheel at rest gets no torque (rolling resistance is not static friction), and
dT/dOmega = -C_rr F_z r_D / omega_eps stays moderate for the implicit integrator.

Derivatives (for the integrator's stiffness and damping matrices)
-----------------------------------------------------------------
Partial derivatives of the returned values at fixed xi0 and dt.  Every input acts
through the slip velocity dv_k and the slip damper m_k (k = x, y):

    dF^D_k = (1 - E H) m_k d(dv_k) + P_k dm_k
    P_k    = dF^D_k/dm_k = (1 - E H) dv_k + (c xi0 - F^S) E (a dt H + 1 - H)/(d + m)
             (dE/dm = E a dt/(d + m),  dH/dm = d/(d + m)^2)
    d(dv_x) = r_D dOmega - dv_x,   d(dv_y) = -dv_y,   dm_k = k_k (F_z dm1 + m1 dF_z)

with u_x = k_x dv_x, u_y = k_y dv_y:

    linear    (w <= mu v*): m1 = 1/v*   dm1/dv_x = dm1/dv_y = 0,
                                        dm1/dOmega = -r_D sign(Omega) m1^2
    saturated (w >  mu v*): m1 = mu/w   dm1/dv_x = m1 k_x u_x / w^2,
                                        dm1/dv_y = m1 k_y u_y / w^2,
                                        dm1/dOmega = -r_D dm1/dv_x

so e.g. dF_x/dv_x = -(1 - E H) m_x + P_x k_x F_z dm1/dv_x and
dF_x/dOmega = (1 - E H) m_x r_D + P_x k_x F_z dm1/dOmega.  Load sensitivity (F_z as
an independent input; chain with dF_z/dxi_z): dF_k/dF_z = P_k k_k m1.

Magic Formula (k_k, u_k, w with the load-scaled stiffness k_k lam_k; sigma = w/v*):

    dm1/dw (fixed v*) = f'(sigma)/(v* w) - f/w^2 =: w h,   dm1/dv* (fixed w) = -f'(sigma)/v*^2
    dm1/dv_x = -h k_x u_x,   dm1/dv_y = -h k_y u_y,
    dm1/dOmega = r_D (h k_x u_x - sign(Omega) f'(sigma)/v*^2)

(linear: f' = 1, f = sigma gives h = 0 and dm1/dOmega = -r_D sign(Omega) m1^2; saturated:
f' = 0, f = mu gives h = -m1/w^2: the two branches above).  Load: F_z acts through m_k's
factor lam_k F_z, through w (prop. to lam_k) and through D = mu lam_mu; f = D g(sigma/D)
gives df/dD = (f - sigma f')/D, so at fixed v*

    dm_k/dF_z = k_k lam_k [m1 (1 + F_z l_k) + F_z h w^2 (l_k - l_mu)],
    l_k = (dlam_k/dF_z)/lam_k = -q_k/(F_z0 lam_k),  l_mu = -q_mu/(F_z0 lam_mu)   (0 where clipped)

and dF_k/dF_z = P_k dm_k/dF_z: all terms are included (the derivatives are one-sided
choices only at the clip points lam = 0.2).  Normal force:
dF_z/dxi_z = k_z, dF_z/d(dxi_z/dt) = d_z where F_z > 0, else 0.  Rolling torque:
dT/dOmega = -C_rr F_z r_D (1 - tanh^2)/omega_eps, dT/dF_z = -C_rr r_D tanh.
At Omega = 0, sign(0) = 0 gives the mean of the one-sided derivatives (= the central
difference).  1 - E H is evaluated as E (1 - H) - expm1(-a dt), without cancellation
when E H -> 1 at standstill.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import NamedTuple, Sequence, Union

import numpy as np
from numba import njit

ArrayLike = Union[float, np.ndarray]

BRUSH = -1.0
"""``shape_factor`` of the brush characteristic (module docstring)."""
TMEASY = -2.0
"""``shape_factor`` of TMeasy's rational characteristic (module docstring)."""
TMEASY_PEAK_RATIO = 2.0
"""Slip of TMeasy's force peak over the slip where the linear law reaches it (module docstring)."""

ROLLING_OMEGA_EPS_RAD_S = 0.5
"""Default spin rate (rad/s) of the tanh smoothing of the rolling-resistance sign."""

# Fields that may be zero (all others must be > 0, except shape_factor: 0, BRUSH, TMEASY or 1..2, and
# curvature_factor: < 1, any sign).
_MAY_BE_ZERO = ("vertical_damping_n_s_per_m", "rolling_resistance_coefficient",
                "load_sensitivity_stiffness", "load_sensitivity_friction")
# Magic-Formula-only fields: must be 0 where shape_factor is 0, BRUSH or TMEASY.
_MF_ONLY = ("curvature_factor",)


@dataclass(frozen=True)
class TireParameters:
    """TMeasy tire parameters (SI).  Each field is a float or an (N,) array, one per wheel.

    Use ``TireParameters.stack([p_fl, p_fr, p_rl, p_rr])`` to build per-wheel arrays
    from per-axle parameter sets; array fields broadcast against the (N,) inputs of
    :func:`tire_forces`.

    unloaded_radius_m                 r_0, m
    dynamic_radius_m                  r_D (<= r_0), m
    vertical_stiffness_n_per_m        k_z, N/m
    vertical_damping_n_s_per_m        d_z (>= 0), N s/m
    longitudinal_slip_stiffness       k_x = dF_x/ds_x / F_z at s = 0, - (typ. 15-20)
    cornering_stiffness_per_rad       k_y = dF_y/ds_y / F_z at s = 0, 1/rad (typ. 10-20)
    deflection_stiffness_x_n_per_m    c_x, N/m
    deflection_stiffness_y_n_per_m    c_y, N/m
    deflection_damping_x_n_s_per_m    d_x (> 0), N s/m
    deflection_damping_y_n_s_per_m    d_y (> 0), N s/m
    slip_velocity_regularisation_m_s  v_n (> 0), m/s; Sanjurjo used 1e-15, any tiny value works
    rolling_resistance_coefficient    C_rr (>= 0), - (0.017 identified by Sanjurjo)
    shape_factor                      Magic Formula C: 0 = linearised characteristic (default),
                                      BRUSH (-1) = brush characteristic,
                                      TMEASY (-2) = TMeasy's rational characteristic,
                                      else 1 <= C <= 2 (typ. 1.3 lateral, 1.65 longitudinal), -
    curvature_factor                  Magic Formula E (< 1; typ. -0.5 .. 0.5), -
    nominal_load_n                    F_z0 (> 0) of the load sensitivity, N
    load_sensitivity_stiffness        q_k (>= 0): k(F_z) = k max(1 - q_k (F_z/F_z0 - 1), 0.2), -
    load_sensitivity_friction         q_mu (>= 0): mu_eff = mu max(1 - q_mu (F_z/F_z0 - 1), 0.2), -

    All fields must be finite; all must be > 0 except d_z, C_rr, C, q_k and q_mu, which may
    be 0, and E (< 1).  Where C = 0, BRUSH or TMEASY, E must be 0 (the linearised,
    brush and TMeasy characteristics have no curvature).  Array fields are stored as read-only float arrays.
    """

    unloaded_radius_m: ArrayLike
    dynamic_radius_m: ArrayLike
    vertical_stiffness_n_per_m: ArrayLike
    vertical_damping_n_s_per_m: ArrayLike
    longitudinal_slip_stiffness: ArrayLike
    cornering_stiffness_per_rad: ArrayLike
    deflection_stiffness_x_n_per_m: ArrayLike
    deflection_stiffness_y_n_per_m: ArrayLike
    deflection_damping_x_n_s_per_m: ArrayLike
    deflection_damping_y_n_s_per_m: ArrayLike
    slip_velocity_regularisation_m_s: ArrayLike
    rolling_resistance_coefficient: ArrayLike
    shape_factor: ArrayLike = 0.0
    curvature_factor: ArrayLike = 0.0
    nominal_load_n: ArrayLike = 4000.0
    load_sensitivity_stiffness: ArrayLike = 0.0
    load_sensitivity_friction: ArrayLike = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if np.ndim(value) == 0:
                try:
                    value = float(value)
                except (TypeError, ValueError):
                    raise ValueError(f"TireParameters.{f.name} must be a number, got {value!r}") from None
            else:
                try:
                    value = np.array(value, dtype=float)
                except (TypeError, ValueError):
                    raise ValueError(f"TireParameters.{f.name} must be numeric, got {value!r}") from None
                if value.ndim != 1:
                    raise ValueError(f"TireParameters.{f.name} must be a scalar or a 1-D array, "
                                     f"got shape {value.shape}")
                value.setflags(write=False)
            if not np.all(np.isfinite(value)):
                raise ValueError(f"TireParameters.{f.name} must be finite, got {value}")
            if f.name == "shape_factor":
                if np.any((value != 0.0) & (value != BRUSH) & (value != TMEASY) & ((value < 1.0) | (value > 2.0))):
                    raise ValueError(f"TireParameters.shape_factor must be 0 (linearised), -1 (brush), -2 (TMeasy) or within 1..2, got {value}")
            elif f.name == "curvature_factor":
                if np.any(value >= 1.0):
                    raise ValueError(f"TireParameters.curvature_factor must be < 1, got {value}")
            elif f.name in _MAY_BE_ZERO:
                if np.any(value < 0.0):
                    raise ValueError(f"TireParameters.{f.name} must be >= 0, got {value}")
            elif np.any(value <= 0.0):
                raise ValueError(f"TireParameters.{f.name} must be > 0, got {value}")
            object.__setattr__(self, f.name, value)
        no_shape = np.asarray(self.shape_factor) <= 0.0
        for name in _MF_ONLY:
            if np.any(no_shape & (np.asarray(getattr(self, name)) != 0.0)):
                raise ValueError(f"TireParameters.{name} must be 0 where shape_factor is 0, -1 or -2 (the linearised, "
                                 f"brush and TMeasy characteristics), got {getattr(self, name)}")
        if np.any(np.asarray(self.dynamic_radius_m) > np.asarray(self.unloaded_radius_m)):
            raise ValueError("TireParameters.dynamic_radius_m must be <= unloaded_radius_m, got "
                             f"{self.dynamic_radius_m} > {self.unloaded_radius_m}")
        # (1, 17) or (N, 17) parameter rows for the compiled kernel (field order = TMeasy order)
        rows = np.array(np.broadcast_arrays(*(getattr(self, f.name) for f in fields(self))), dtype=float).reshape(len(fields(self)), -1).T
        rows = np.ascontiguousarray(rows)
        rows.setflags(write=False)
        object.__setattr__(self, "rows", rows)

    @classmethod
    def stack(cls, per_wheel: Sequence[TireParameters]) -> TireParameters:
        """One parameter set whose fields are (N,) arrays, from N scalar parameter sets."""
        if len(per_wheel) == 0:
            raise ValueError("TireParameters.stack needs at least one parameter set")
        for p in per_wheel:
            if not isinstance(p, cls):
                raise ValueError(f"TireParameters.stack takes TireParameters, got {type(p).__name__}")
            if any(np.ndim(getattr(p, f.name)) != 0 for f in fields(cls)):
                raise ValueError("TireParameters.stack takes parameter sets with scalar fields")
        return cls(**{f.name: np.array([getattr(p, f.name) for p in per_wheel]) for f in fields(cls)})


class TireState(NamedTuple):
    """Carcass deflections at the start of the step, (N,) each, m."""

    deflection_x_m: np.ndarray
    deflection_y_m: np.ndarray

    @classmethod
    def zeros(cls, n: int) -> TireState:
        """Undeflected tires."""
        return cls(np.zeros(n), np.zeros(n))


class TireOutput(NamedTuple):
    """Result of :func:`tire_forces`; every field is an (N,) array.

    fx_n, fy_n, fz_n           forces on the wheel from the road, tire frame, N
    rolling_torque_n_m         rolling-resistance torque on the wheel about its spin axis, N m
    slip_ratio                 s_x = (r_D Omega - v_x)/v*, -
    slip_angle_rad             ISO 8855: angle from the wheel heading to the contact-point
                               velocity, counter-clockwise positive, atan2(v_y, v_x)
    deflection_x_m, _y_m       deflections at the end of the step (commit on acceptance)
    dfx_dvx ... dfy_domega     partial derivatives of fx, fy w.r.t. v_x, v_y (N s/m) and
                               Omega (N s/rad), at fixed deflection state and dt
    dfz_dxi, dfz_dxidot        dF_z/dxi_z (N/m), dF_z/d(dxi_z/dt) (N s/m)
    dfx_dfz, dfy_dfz           load sensitivity dF_x/dF_z, dF_y/dF_z, -
    drolling_torque_domega     dT_rr/dOmega, N m s/rad
    drolling_torque_dfz        dT_rr/dF_z, m
    """

    fx_n: np.ndarray
    fy_n: np.ndarray
    fz_n: np.ndarray
    rolling_torque_n_m: np.ndarray
    slip_ratio: np.ndarray
    slip_angle_rad: np.ndarray
    deflection_x_m: np.ndarray
    deflection_y_m: np.ndarray
    dfx_dvx: np.ndarray
    dfx_dvy: np.ndarray
    dfx_domega: np.ndarray
    dfy_dvx: np.ndarray
    dfy_dvy: np.ndarray
    dfy_domega: np.ndarray
    dfz_dxi: np.ndarray
    dfz_dxidot: np.ndarray
    dfx_dfz: np.ndarray
    dfy_dfz: np.ndarray
    drolling_torque_domega: np.ndarray
    drolling_torque_dfz: np.ndarray


def tire_forces_array(p: TireParameters, mu: ArrayLike, compression_m: np.ndarray,
                      compression_rate_m_s: np.ndarray, vx_m_s: np.ndarray, vy_m_s: np.ndarray,
                      omega_rad_s: np.ndarray, state: TireState, dt_s: float, *,
                      omega_eps_rad_s: float = ROLLING_OMEGA_EPS_RAD_S) -> np.ndarray:
    """Tire forces, rolling torque, end-of-step deflections and their derivatives.

    Parameters
    ----------
    p : TireParameters with scalar or (N,) fields.
    mu : friction coefficient (> 0), scalar or (N,).
    compression_m : (N,) xi_z = r_0 - wheel-centre height above the road, m (<= 0 airborne).
    compression_rate_m_s : (N,) d xi_z / dt, m/s.
    vx_m_s, vy_m_s : (N,) contact-point velocity in the tire frame, m/s.
    omega_rad_s : (N,) wheel spin rate, rad/s, positive rolling forward.
    state : TireState, deflections at the start of the step.
    dt_s : step length (> 0), s; the deflection ODE is solved exactly over it.
    omega_eps_rad_s : smoothing spin rate of the rolling-resistance sign (> 0), rad/s.

    Returns
    -------
    (20, N) array, one row per :class:`TireOutput` field (equations in the module docstring;
    :func:`tire_forces` gives the named tuple).  Call it at every Newton iterate
    with the same ``state`` and the iterate's end-of-step velocities (the ODE
    coefficients are frozen at those inputs); commit ``deflection_x_m`` and
    ``deflection_y_m`` as the next state only when the step is accepted.  Scalar
    parameter fields broadcast.  The work is done by the compiled kernel :func:`tmeasy_into`,
    which vehicle models call directly to avoid the wrapper's allocations.
    """
    if not dt_s > 0.0:
        raise ValueError(f"dt_s must be > 0, got {dt_s}")
    if not omega_eps_rad_s > 0.0:
        raise ValueError(f"omega_eps_rad_s must be > 0, got {omega_eps_rad_s}")
    n = len(compression_m)
    mu = np.asarray(mu, dtype=float)
    if not np.min(mu, initial=1.0) > 0.0:
        raise ValueError(f"mu must be > 0, got {mu}")
    if mu.ndim > 1 or mu.size not in (1, n):
        raise ValueError(f"mu must be a scalar or one value per wheel ({n}), got shape {mu.shape}")
    mu = np.broadcast_to(mu, (n,))
    out = np.empty((len(TireOutput._fields), n))
    tmeasy_into(p.rows, mu, compression_m, compression_rate_m_s, vx_m_s, vy_m_s, omega_rad_s,
                state.deflection_x_m, state.deflection_y_m, dt_s, omega_eps_rad_s, out)
    return out


def tire_forces(p: TireParameters, mu: ArrayLike, compression_m: np.ndarray,
                compression_rate_m_s: np.ndarray, vx_m_s: np.ndarray, vy_m_s: np.ndarray,
                omega_rad_s: np.ndarray, state: TireState, dt_s: float, *,
                omega_eps_rad_s: float = ROLLING_OMEGA_EPS_RAD_S) -> TireOutput:
    """:func:`tire_forces_array` as a :class:`TireOutput` (its fields are rows of that array)."""
    return TireOutput(*tire_forces_array(p, mu, compression_m, compression_rate_m_s, vx_m_s, vy_m_s, omega_rad_s, state, dt_s,
                                         omega_eps_rad_s=omega_eps_rad_s))


@njit(cache=True)
def tmeasy_into(rows, mu, xi_z, xi_z_dot, vx, vy, omega, xi0_x, xi0_y, dt, omega_eps, out):
    """Compiled kernel of :func:`tire_forces`: wheel i uses parameter row min(i, len(rows) - 1)
    (``TireParameters.rows``) and writes the TireOutput fields into out[:, i]."""
    last = rows.shape[0] - 1
    for i in range(out.shape[1]):
        r0, rd, kz, dz, kx, ky, cx, cy, ddx, ddy, vn, crr, shape, curv, fz0, qk, qmu = rows[min(i, last)]
        # normal force: F_z = max(0, k_z xi + d_z dxi) where xi > 0
        fz = max(kz * xi_z[i] + dz * xi_z_dot[i], 0.0) if xi_z[i] > 0.0 else 0.0
        loaded = 1.0 if fz > 0.0 else 0.0
        om = omega[i]
        sign_om = 1.0 if om > 0.0 else (-1.0 if om < 0.0 else 0.0)
        # slip velocities dv = (r_D Omega - v_x, -v_y), u = (k_x dv_x, k_y dv_y)
        v_star = rd * abs(om) + vn
        dvx, dvy = rd * om - vx[i], -vy[i]
        # load sensitivity lam = max(1 - q (F_z/F_z0 - 1), 0.2); l = (dlam/dF_z)/lam (every characteristic; 1 and 0 for q = 0)
        lam_k, lam_mu = 1.0 - qk * (fz / fz0 - 1.0), 1.0 - qmu * (fz / fz0 - 1.0)
        l_k = -qk / (fz0 * lam_k) if lam_k > 0.2 else 0.0
        l_mu = -qmu / (fz0 * lam_mu) if lam_mu > 0.2 else 0.0
        lam_k, lam_mu = max(lam_k, 0.2), max(lam_mu, 0.2)
        kx, ky = kx * lam_k, ky * lam_k
        mu_i = mu[i] * lam_mu
        ux, uy = kx * dvx, ky * dvy
        w = math.hypot(ux, uy)
        h = 0.0
        if shape == 0.0:
            # slip damper per unit load m1 = min(1/v*, mu/w)
            mu_v = mu_i * v_star
            sat = w > mu_v
            den = max(w, mu_v)
            m1 = mu_i / den
            # dm1/dv (saturated only) and dm1/dOmega
            g = m1 / (den * den) if sat else 0.0
            dm1_dvx, dm1_dvy = g * kx * ux, g * ky * uy
            dm1_dom = -rd * (dm1_dvx if sat else m1 * m1 * sign_om)
            w_dm1_dw = -m1 if sat else 0.0
        elif shape < 0.0:
            # brush f = mu (1 - (1 - z)^3), z = sigma / (3 mu), or TMeasy's rational characteristic (module docstring)
            m1, fp, dm1_dw = _brush(w, v_star, mu_i) if shape == BRUSH else _tmeasy(w, v_star, mu_i)
            cos_x, cos_y = (ux / w, uy / w) if w > 1e-12 else (0.0, 0.0)
            dm1_dvx, dm1_dvy = -dm1_dw * kx * cos_x, -dm1_dw * ky * cos_y
            dm1_dom = rd * (dm1_dw * kx * cos_x - sign_om * fp / (v_star * v_star))
            w_dm1_dw = w * dm1_dw
        else:
            w_dm1_dw = 0.0
            m1, fp, h = _magic_formula(w, v_star, shape, curv, mu_i)
            # dm1/dw = w h (fixed v*), dm1/dv* = -f'/v*^2 (fixed w)
            dm1_dvx, dm1_dvy = -h * kx * ux, -h * ky * uy
            dm1_dom = rd * (h * kx * ux - sign_om * fp / (v_star * v_star))
        # (dm_k/dF_z)/(k_k lam_k), m_k = k_k lam_k F_z m1: each characteristic is f(sigma) = D g(sigma / D), so m1 moves
        # with lam_k through w and with lam_mu through D as w dm1/dw (l_k - l_mu)
        if shape > 0.0:
            m_fz = m1 * (1.0 + fz * l_k) + fz * h * w * w * (l_k - l_mu)
        else:
            m_fz = m1 * (1.0 + fz * l_k) + fz * w_dm1_dw * (l_k - l_mu)
        fd_x, xi1_x, pk_x, ddv_x = _deflection(kx, cx, ddx, dvx, fz, m1, xi0_x[i], dt)
        fd_y, xi1_y, pk_y, ddv_y = _deflection(ky, cy, ddy, dvy, fz, m1, xi0_y[i], dt)
        pfx, pfy = pk_x * fz, pk_y * fz
        # rolling resistance T = -C_rr r_D F_z tanh(Omega/omega_eps)
        th = math.tanh(om / omega_eps)
        dtrr_dfz = -crr * rd * th
        out[0, i] = fd_x
        out[1, i] = fd_y
        out[2, i] = fz
        out[3, i] = dtrr_dfz * fz
        out[4, i] = dvx / v_star
        out[5, i] = math.atan2(vy[i], vx[i])
        out[6, i] = xi1_x
        out[7, i] = xi1_y
        out[8, i] = pfx * dm1_dvx - ddv_x
        out[9, i] = pfx * dm1_dvy
        out[10, i] = pfx * dm1_dom + ddv_x * rd
        out[11, i] = pfy * dm1_dvx
        out[12, i] = pfy * dm1_dvy - ddv_y
        out[13, i] = pfy * dm1_dom
        out[14, i] = kz * loaded
        out[15, i] = dz * loaded
        out[16, i] = pk_x * m_fz
        out[17, i] = pk_y * m_fz
        out[18, i] = (-crr * rd * fz / omega_eps) * (1.0 - th * th)
        out[19, i] = dtrr_dfz


@njit(cache=True)
def _magic_formula(w, v_star, c, e, d):
    """Slip damper per unit load m1 = f(sigma)/w (s/m), f'(sigma) (-) and h = (dm1/dw)/w (s/m^3)
    at fixed v*, for f(sigma) = D sin(C atan(B sigma - E (B sigma - atan(B sigma)))), B = 1/(C D),
    sigma = w/v* (module docstring)."""
    b = 1.0 / (c * d)
    sigma = w / v_star
    x = b * sigma
    if x < 1e-4:
        # f = sigma + s3 sigma^3 + O(sigma^5): finite at w = 0
        s3 = -b * b * ((1.0 + e) / 3.0 + c * c / 6.0)
        q = s3 * sigma * sigma
        return (1.0 + q) / v_star, 1.0 + 3.0 * q, 2.0 * s3 / (v_star * v_star * v_star)
    x2 = x * x
    phi = x - e * (x - math.atan(x))
    theta = c * math.atan(phi)
    f = d * math.sin(theta)
    fp = d * math.cos(theta) * c * b * (1.0 - e * x2 / (1.0 + x2)) / (1.0 + phi * phi)
    m1 = f / w
    return m1, fp, (fp / v_star - m1) / (w * w)


@njit(cache=True)
def _brush(w, v_star, d):
    """Slip damper per unit load m1 = f(sigma)/w (s/m), f'(sigma) (-) and dm1/dw (s^2/m^2) at fixed v* for the brush
    characteristic f = D (1 - (1 - z)^3), z = sigma / (3 D), f = D from z = 1 (module docstring); f/w is finite at w = 0."""
    z = w / (3.0 * d * v_star)
    if z < 1.0:
        return (1.0 - z + z * z / 3.0) / v_star, (1.0 - z) ** 2, (-1.0 + 2.0 * z / 3.0) / (3.0 * d * v_star * v_star)
    return d / w, 0.0, -d / (w * w)


@njit(cache=True)
def _tmeasy(w, v_star, d):
    """Slip damper per unit load m1 = f(sigma)/w (s/m), f'(sigma) (-) and dm1/dw (s^2/m^2) at fixed v* for TMeasy's
    rational characteristic f = sigma / (1 + x (x + a - 2)), x = sigma / (a D), f = D from x = 1 (module docstring)."""
    a = TMEASY_PEAK_RATIO
    x = w / (a * d * v_star)
    if x < 1.0:
        den = 1.0 + x * (x + a - 2.0)
        return 1.0 / (v_star * den), (1.0 - x * x) / (den * den), -(2.0 * x + a - 2.0) / (a * d * v_star * v_star * den * den)
    return d / w, 0.0, -d / (w * w)


@njit(cache=True)
def _deflection(k, c, d, dv, fz, m1, xi0, dt):
    """One direction of the deflection dynamics over dt (module docstring): returns F^D, xi(dt),
    k dF^D/dm and dF^D/d(dv) at fixed m."""
    m = k * fz * m1
    f_ss = m * dv
    dm = d + m
    nadt = -c * dt / dm                  # -a dt
    em1 = math.expm1(nadt)               # E - 1
    e = em1 + 1.0
    eg = e * (d / dm)                    # E (1 - H), H = m/(d + m)
    eh = e - eg                          # E H
    one_m_eh = eg - em1                  # 1 - E H, without cancellation when E H -> 1
    r = c * xi0 - f_ss
    fd = f_ss + r * eh
    xi1 = xi0 * e - (f_ss / c) * em1     # xi_ss + (xi0 - xi_ss) E
    pk = (one_m_eh * dv + r * ((eg - nadt * eh) / dm)) * k
    return fd, xi1, pk, one_m_eh * m
