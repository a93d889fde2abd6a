"""scripts/disk.py against the real podman of this machine: what it finds and removes as this
project's (its label, the lab inventory's names) and what it leaves (another project's containers,
whatever their names); the free-space check's arithmetic and message against the real filesystem."""

import importlib.util
import os
import shutil
import subprocess
import uuid

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "disk.py")
SPEC = importlib.util.spec_from_file_location("disk", SCRIPT)
disk = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(disk)

IMAGE = os.environ.get("MOLECULE_IMAGE", "localhost/blackwell-sglang-test:bookworm")


def podman(*args, check=True):
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def containers():
    """Create (not start) containers from the test image; remove what is left at the end."""
    if shutil.which("podman") is None or podman("image", "exists", IMAGE, check=False).returncode != 0:
        pytest.skip("needs podman and the test image (./scripts/bootstrap.sh)")
    made = []

    def create(name, *labels):
        podman("create", "--name", name, *["--label=" + label for label in labels], IMAGE, "/bin/true")
        made.append(name)
        return name

    yield create
    for name in made:
        podman("rm", "--force", name, check=False)


def exists(name):
    return podman("container", "exists", name, check=False).returncode == 0


def test_clean_removes_only_this_projects_nodes_of_that_scenario(containers):
    run = uuid.uuid4().hex[:8]
    scenario = "unit-" + run
    ours = containers("molecule-pro6000-" + run, disk.LABEL + "=" + scenario)
    # Another run's scenario of this project, and another project's Molecule node with a name like
    # ours (Molecule labels every node owner=molecule): both stay.
    other_scenario = containers("fleet-pro6000-" + run, disk.LABEL + "=unit-other-" + run)
    other_project = containers("molecule-pro6000-" + run + "-x", "owner=molecule", "io.other-project.scenario=" + scenario)
    found = {name: kind for name, kind, _size in disk.containers(scenario=scenario)}
    assert found == {ours: "node of Molecule scenario " + scenario}
    lines = disk.clean(scenario=scenario)
    assert not exists(ours) and exists(other_scenario) and exists(other_project)
    assert ours in lines[1] and lines[-1].startswith("disk.py clean: freed ")
    assert disk.clean(scenario=scenario) == ["disk.py clean: no node of this project's Molecule scenarios (%s) is left" % scenario]


def test_the_lab_is_found_by_the_inventorys_names_and_never_cleaned(containers, monkeypatch, tmp_path):
    run = uuid.uuid4().hex[:8]
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("lab:\n  children:\n    pro6000:\n      hosts:\n        lab-a:\n          ansible_host: bsg-lab-%s\n" % run)
    monkeypatch.setattr(disk, "LAB_INVENTORY", str(inventory))
    lab = containers("bsg-lab-" + run)
    similar = containers("bsg-lab-" + run + "-old")
    kinds = {name: kind for name, kind, _size in disk.containers(sizes=True)}
    assert kinds[lab] == "lab node (./scripts/lab.sh --remove)" and similar not in kinds
    disk.clean(scenario="unit-none-" + run)
    assert exists(lab) and exists(similar)


def test_the_real_lab_inventory_names_its_containers():
    assert sorted(disk.lab_names()) == ["bsg-lab-b300", "bsg-lab-gateway", "bsg-lab-pro6000"]


def write_budget(tmp_path, needs):
    path = tmp_path / "ci-budget.yml"
    path.write_text("total: 45\ndisk_gb: 40\ndisk_need_gb:\n" + "".join("  %s: %s\n" % item for item in needs.items()))
    return str(path)


def test_check_adds_up_lanes_side_by_side_and_takes_the_largest_of_a_lane(tmp_path, monkeypatch):
    free = disk.usage(str(tmp_path))[1] / disk.GB
    monkeypatch.setattr(disk, "containers", lambda **_kwargs: [("bsg-lab-x", "lab node (./scripts/lab.sh --remove)", 11.5e9)])
    # Two lanes whose largest scenarios fit only together with less than what is free.
    budget = write_budget(tmp_path, {"a": round(free / 2 - 1, 1), "b": 1, "c": round(free / 2 - 1, 1)})
    assert disk.check(["a,b", "c"], budget, path=str(tmp_path)) is None
    budget = write_budget(tmp_path, {"a": round(free / 2 + 1, 1), "b": 1, "c": round(free / 2 + 1, 1)})
    message = disk.check(["a,b", "c"], budget, path=str(tmp_path))
    first = message.splitlines()[0]
    assert first.startswith("disk.py: not enough free disk for Molecule a,b beside c: ")
    each = round(free / 2 + 1, 1)
    assert "GB free on %s, %.1f GB needed (a %g + c %g;" % (tmp_path, 2 * each, each, each) in first
    assert [line.split() for line in message.splitlines() if "bsg-lab-x" in line] == [
        ["bsg-lab-x", "11.5", "GB", "lab", "node", "(./scripts/lab.sh", "--remove)"]]
    assert "./scripts/test.sh --clean" in message and "./scripts/lab.sh --remove" in message


def test_check_names_a_scenario_without_a_figure(tmp_path):
    budget = write_budget(tmp_path, {"a": 1})
    assert disk.check(["a,zz"], budget, path=str(tmp_path)) == (
        "disk.py: no disk_need_gb for zz in %s: add what each scenario's nodes hold at their largest" % os.path.relpath(budget, disk.ROOT))


def test_every_scenario_has_a_disk_figure():
    scenarios = [d for d in os.listdir(os.path.join(disk.ROOT, "molecule"))
                 if os.path.exists(os.path.join(disk.ROOT, "molecule", d, "molecule.yml"))]
    assert sorted(disk.needs()) == sorted(scenarios)


def test_every_scenario_labels_its_nodes():
    for scenario in disk.needs():
        with open(os.path.join(disk.ROOT, "molecule", scenario, "molecule.yml"), encoding="utf-8") as handle:
            platforms = disk.yaml.safe_load(handle)["platforms"]
        assert all(p.get("extra_opts") == ["--label=%s=%s" % (disk.LABEL, scenario)] for p in platforms), scenario
