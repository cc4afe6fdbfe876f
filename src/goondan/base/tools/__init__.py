"""Standard tools of ``@goondan/base`` (declared in ``tools.yaml``): one module per Tool resource.

The Tool resources themselves are declared in ``tools.yaml`` next to these modules; the runtime
imports each module from its file path and reads its ``handlers`` dict. Modules therefore use
absolute imports only (``goondan.base.tools._common``), never relative ones.
"""
