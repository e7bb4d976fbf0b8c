"""The package's error base (issue 13 item 17): every error raised on purpose is a StateObserverError, configuration
errors carry the key they are about, and the built-in bases callers catch are kept."""
import ast
import pathlib

import pytest

import state_observer
from state_observer import errors
from state_observer.errors import ConfigError, ParameterError, StateObserverError
from state_observer.io.pipeline import load_observer
from state_observer.io.params import load_config, load_file, parameter_of

PACKAGE = pathlib.Path(state_observer.__file__).parent


def test_every_exception_class_of_the_package_lives_in_errors_and_derives_from_the_base():
    # (a private control-flow exception such as io.record's _Terminated is not an error)
    defined = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and any(
                    getattr(b, "id", getattr(b, "attr", "")).endswith(("Error", "Exception", "Unavailable", "Divergence"))
                    for b in node.bases):
                defined[node.name] = path.relative_to(PACKAGE).as_posix()
    assert defined and {path for path in defined.values()} == {"errors.py"}, defined
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), StateObserverError), name


def test_configuration_errors_keep_their_builtin_base_and_name_their_key():
    assert issubclass(errors.VehicleConfigError, ValueError) and issubclass(errors.SolverError, RuntimeError)
    assert issubclass(errors.DataFileNotFoundError, FileNotFoundError)
    with pytest.raises(ParameterError) as info:
        load_config(dt_s=0.5)
    assert info.value.key == "dt_s" and str(info.value).startswith("parameter dt_s: must be within")


def test_a_setting_error_names_its_parameter_not_the_setting():
    assert parameter_of("initial_mass_kg") == "model.initial_mass_kg"
    assert parameter_of("start_mode") == "start.mode" and parameter_of("standstill_updates") == "sensors.standstill"
    assert parameter_of("gnss_horizontal_sigma_m") == "noise.gnss_horizontal_sigma_m"
    with pytest.raises(ParameterError) as info:  # valid on its own, invalid for this car: not a vehicle-file error
        load_observer(load_config(**{"model.initial_mass_kg": 60.0}))
    assert info.value.key == "model.initial_mass_kg"
    assert str(info.value).startswith("parameter model.initial_mass_kg: 60 kg is not more than the vehicle file's unsprung")


def test_a_params_file_error_names_the_file_and_keeps_the_key(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("observer_node:\n  ros__parameters:\n    dt_s: 5.0\n")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.key == "dt_s" and str(info.value).startswith(f"{path}: parameter dt_s:")
