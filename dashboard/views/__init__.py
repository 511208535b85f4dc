"""Dashboard pages (layout only), routed by ``dashboard/app.py`` with ``st.navigation``."""
