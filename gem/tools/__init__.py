"""``gem.tools``: GEM's tool classes at GEM's module paths (``gem.tools.python_code_tool.PythonCodeTool``,
``gem.tools.search_tool.SearchTool``, ``gem.tools.tool_env_wrapper.ToolEnvWrapper``), each the core's
tool or wrapper under GEM's constructor arguments. Imported on first use, like :mod:`gem_core.tools`."""
