"""quotaloop's user-facing layer: the CLI, the Streamlit app, chart builders and report export."""
