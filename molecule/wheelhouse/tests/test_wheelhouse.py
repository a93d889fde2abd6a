"""sglang_venv on a host with no network: wheels from the controller, installed with --no-index."""

import json


def test_host_has_no_network(host):
    # podman's network "none": the loopback interface alone, no default route, so no name resolves
    # (the resolver's packets cannot leave: nothing is sent anywhere).
    assert host.check_output("ls /sys/class/net").split() == ["lo"]
    assert host.check_output("ip -4 route show default; ip -6 route show default") == ""
    probe = host.run("python3 -c \"import socket; socket.getaddrinfo('pypi.org', 443)\"")
    assert probe.rc == 1
    assert "socket.gaierror: [Errno -3] Temporary failure in name resolution" in probe.stderr, probe.stderr


def test_venv_was_built_from_the_shipped_wheelhouse(host):
    current = host.file("/opt/sglang/current").linked_to
    venv_id = current.rsplit("/", 1)[1]
    wheels = host.check_output("ls /opt/sglang/wheelhouse/%s" % venv_id).split()
    assert any(w.startswith("tomli_w-1.2.0-") and w.endswith(".whl") for w in wheels)
    assert any(w.startswith("six-1.17.0-") and w.endswith(".whl") for w in wheels)
    marker = json.loads(host.file(current + "/.sglang-venv.json").content_string)
    assert marker["packages"] == ["six==1.17.0", "tomli-w==1.2.0"]


def test_packages_import_as_the_service_user(host):
    out = host.check_output(
        "runuser -u sglang -- /opt/sglang/current/bin/python -c "
        "'import six, tomli_w, importlib.metadata as m; print(m.version(\"six\"), m.version(\"tomli-w\"))'"
    )
    assert out.split() == ["1.17.0", "1.2.0"]


def test_uv_came_from_the_controller(host):
    uv = host.file("/opt/sglang/tools/uv-0.13.9/uv-0.13.9.data/scripts/uv")
    assert uv.is_file and uv.mode & 0o111
    assert host.check_output(uv.path + " --version").startswith("uv 0.13.9")
