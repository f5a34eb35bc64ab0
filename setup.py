"Package metadata read from settings.ini (nbdev's template without pkg_resources)."
from configparser import ConfigParser
import setuptools

cfg = ConfigParser(delimiters=["="])
cfg.read("settings.ini", encoding="utf-8")
cfg = cfg["DEFAULT"]
licenses = {"apache2": ("Apache Software License 2.0", "OSI Approved :: Apache Software License")}
# settings.ini `status` is the trove number: 1 Planning ... 3 Alpha, 4 Beta, 5 Production/Stable (1-based)
statuses = {1: "Planning", 2: "Pre-Alpha", 3: "Alpha", 4: "Beta", 5: "Production/Stable", 6: "Mature", 7: "Inactive"}

setuptools.setup(
    name=cfg["lib_name"].replace("_", "-"),
    version=cfg["version"],
    description=cfg["description"],
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    license=licenses[cfg["license"]][0],
    license_files=["LICENSE"],
    url=cfg["git_url"],
    keywords=cfg.get("keywords", "").split(),
    classifiers=[
        "Development Status :: " + str(cfg["status"]) + " - " + statuses[int(cfg["status"])],
        "Intended Audience :: " + cfg["audience"].title(),
        "License :: " + licenses[cfg["license"]][1],
        "Natural Language :: " + cfg["language"].title(),
        "Programming Language :: Python :: 3.11",
    ],
    packages=setuptools.find_packages(include=["mini_infer", "mini_infer.*"]),
    include_package_data=True,
    install_requires=cfg.get("requirements", "").split(),
    # settings.ini `extras = dev gemma`: each NAME's packages are `NAME_requirements`
    extras_require={name: cfg.get(f"{name}_requirements", "").split()
                    for name in cfg.get("extras", "dev").split()},
    python_requires=">=" + cfg["min_python"],
    zip_safe=False,
    entry_points={"console_scripts": cfg.get("console_scripts", "").split(), "nbdev": [f"{cfg['lib_name']}={cfg['lib_name']}._modidx:d"]},
)
