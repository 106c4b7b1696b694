"""A small Scrapy project that crawls the demo site with scrapy-simhash enabled."""
