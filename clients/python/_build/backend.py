"""An in-tree PEP 517 build backend for the streamkpca client, so that
`pip install ./clients/python` works with no network: pip's build
isolation installs a backend's requirements from an index, and this one
has none (pyproject.toml: requires = []). It builds a pure-Python wheel of
the package in streamkpca/ with the metadata of pyproject.toml's [project]
table, and an sdist of the directory. Standard library only."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project():
    """The [project] table's name, version, summary, requires-python,
    dependencies and optional dependencies (tomllib where there is one,
    else the subset of TOML pyproject.toml uses)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib
        return tomllib.loads(raw.decode("utf-8"))["project"]
    except ImportError:
        pass
    text = raw.decode("utf-8")
    proj, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
            continue
        m = re.match(r'([A-Za-z0-9_-]+)\s*=\s*(.*)$', line)
        if not m:
            continue
        key, val = m.group(1), m.group(2)
        items = re.findall(r'"([^"]*)"', val)
        if section == "project":
            proj[key] = items if val.startswith("[") else (items[0] if items else val)
        elif section == "project.optional-dependencies":
            proj.setdefault("optional-dependencies", {})[key] = items
    return proj


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}", f"Requires-Python: {p.get('requires-python', '>=3')}"]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    return p, "\n".join(lines) + "\n"


def _dist_info(p):
    return f"{p['name']}-{p['version']}.dist-info"


WHEEL = "Wheel-Version: 1.0\nGenerator: streamkpca-in-tree\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p, meta = _metadata()
    d = os.path.join(metadata_directory, _dist_info(p))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(meta)
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(WHEEL)
    return _dist_info(p)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p, meta = _metadata()
    name = f"{p['name']}-{p['version']}-py3-none-any.whl"
    files = []
    pkg = os.path.join(ROOT, "streamkpca")
    for fn in sorted(os.listdir(pkg)):
        if fn.endswith(".py"):
            with open(os.path.join(pkg, fn), "rb") as f:
                files.append((f"streamkpca/{fn}", f.read()))
    info = _dist_info(p)
    files += [(f"{info}/METADATA", meta.encode()), (f"{info}/WHEEL", WHEEL.encode()),
              (f"{info}/top_level.txt", b"streamkpca\n")]
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    p, meta = _metadata()
    base = f"{p['name']}-{p['version']}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for sub in ("pyproject.toml", "README.md", "streamkpca", "_build"):
            t.add(os.path.join(ROOT, sub), arcname=f"{base}/{sub}",
                  filter=lambda i: None if "__pycache__" in i.name else i)
        data = meta.encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
