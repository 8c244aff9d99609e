"""The pages of scripts/reference.py (`make reference`), one module a page or two.

* `markdown`: tables, code spans, attribute docstrings, `Undocumented`;
* `contract`, `configuration`, `cli`: their pages;
* `web`: the web API's page and the metrics'.
"""
