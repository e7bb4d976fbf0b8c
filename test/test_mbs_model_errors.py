"""Malformed model definitions fail with one line naming the item at fault."""
import numpy as np
import pytest

from state_observer.mbs import BodyPoint, Distance, ModelBuilder, ModelError, Spherical


def base():
    b = ModelBuilder(dim=3, name="car")
    b.fixed_point("O", (0.0, 0.0, 0.0))
    b.point("p", (1.0, 0.0, 0.0))
    b.point("r", (1.0, 1.0, 0.0))
    b.vector("u", (0.0, 0.0, 1.0))
    b.vector("w", (1.0, 0.0, 0.0))
    return b


ARM = dict(points={"p": (0, 0, 0), "r": (0, 1, 0)}, vectors={"u": (0, 0, 1), "w": (1, 0, 0)})


def one_line(excinfo, *words):
    msg = str(excinfo.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg


def test_unknown_body():
    b = base()
    b.body("arm", 1.0, (0, 0, 0), (0.1, 0.1, 0.1), **ARM)
    b.add_constraint(Spherical(BodyPoint("chassis", (0, 0, 0)), BodyPoint("arm", (0, 0, 0))))
    with pytest.raises(ModelError) as e:
        b.build()
    one_line(e, "car", "unknown body 'chassis'")


def test_missing_inertia():
    with pytest.raises(ModelError) as e:
        base().body("arm", 1.0, (0, 0, 0), None, {"p": (0, 0, 0)})
    one_line(e, "body 'arm'", "missing inertia")


@pytest.mark.parametrize("mass", [0.0, -2.0, np.nan])
def test_zero_or_negative_mass(mass):
    with pytest.raises(ModelError) as e:
        base().body("arm", mass, (0, 0, 0), (0.1, 0.1, 0.1), {"p": (0, 0, 0)})
    one_line(e, "body 'arm'", "mass must be positive")


def test_non_unit_vector_guess():
    with pytest.raises(ModelError) as e:
        base().vector("w", (0.0, 2.0, 0.0))
    one_line(e, "vector 'w'", "not a unit vector")


def test_non_unit_local_direction():
    with pytest.raises(ModelError) as e:
        base().body("arm", 1.0, (0, 0, 0), (0.1, 0.1, 0.1), {"p": (0, 0, 0)}, {"u": (0, 0, 3)})
    one_line(e, "body 'arm'", "'u'", "unit")


def test_unknown_point_in_body():
    with pytest.raises(ModelError) as e:
        base().body("arm", 1.0, (0, 0, 0), (0.1, 0.1, 0.1), {"q": (0, 0, 0)})
    one_line(e, "body 'arm'", "unknown point 'q'")


def test_unphysical_inertia():
    with pytest.raises(ModelError) as e:
        b = base()
        b.body("arm", 1.0, (0, 0, 0), (0.1, 0.1, 5.0), **ARM)
        b.build()
    one_line(e, "body 'arm'", "triangle inequality")


def test_inertia_outside_the_span_of_the_body():
    b = base()
    b.body("arm", 1.0, (0, 0.5, 0), (0.1, 0.1, 0.1), {"p": (0, 0, 0), "r": (0, 1, 0)}, {"u": (0, 0, 1)})
    with pytest.raises(ModelError) as e:
        b.build()
    one_line(e, "body 'arm'", "add a point or unit vector")


def test_duplicate_coordinate():
    with pytest.raises(ModelError) as e:
        base().point("p", (0, 0, 0))
    one_line(e, "'p' defined twice")


def test_contradictory_constraints():
    b = base()
    b.body("arm", 1.0, (0, 0, 0), (0.1, 0.1, 0.1), **ARM)
    b.add_constraint(Distance("O", "p", 1.0))
    b.add_constraint(Distance("O", "p", 2.0))
    with pytest.raises(ModelError) as e:
        b.build()
    one_line(e, "distance(O,p)", "contradict")


def test_constraint_between_fixed_points_that_cannot_hold():
    b = base()
    b.fixed_point("Z", (3.0, 0.0, 0.0))
    b.body("arm", 1.0, (0, 0, 0), (0.1, 0.1, 0.1), **ARM)
    b.add_constraint(Distance("O", "Z", 1.0))
    with pytest.raises(ModelError) as e:
        b.build()
    one_line(e, "distance(O,Z)", "can never hold")


def test_coordinate_without_mass_or_constraint():
    b = base()
    b.angle("loose", 0.0)
    b.body("arm", 1.0, (0, 0, 0), (0.1, 0.1, 0.1), **ARM)
    with pytest.raises(ModelError) as e:
        b.build()
    one_line(e, "'loose'", "no mass and no constraint")


def test_duplicated_rows_are_merged_not_contradicted():
    """Two bodies sharing a unit vector generate its unit-norm row once."""
    b = base()
    b.point("s", (0.0, 0.0, 1.0))
    b.body("arm", 1.0, (0, 0, 0), (0.1, 0.1, 0.1), **ARM)
    b.body("post", 1.0, (0, 0, 0), (0.1, 0.1, 0.1), {"s": (0, 0, 0), "r": (1, 1, -1)}, {"u": (0, 0, 1), "w": (1, 0, 0)})
    model = b.build()
    # arm: 6 dot products of (r - p, u, w); post: 3 new ones with r - s; the u.u, u.w, w.w rows and
    # the unit-vector rows repeat and are kept once (14 rows without merging)
    assert model.m == 9
